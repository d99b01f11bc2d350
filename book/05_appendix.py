# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Appendix
#
# **A** lists every hyper-parameter, generated from the experiment registry (`attnlib.experiments`), so
# that the tables cannot drift from what is trained. **B** draws the attention maps of the [Re] report's
# appendix for our trained models. **C** shows the training curves of every run.

# %% tags=["hide-input"]
from attnlib import book, experiments, viz

# %% tags=["parameters"]
preset = "budget"  # paper | budget | smoke
data = None  # None: the preset's data ($ATTNLIB_DATA or ../shared/data/cifar10); "synthetic"; a folder
device = "auto"  # auto | cpu | cuda | cuda:N (only used to train what results/ lacks)
seed = 0  # seed of the runs (results/<experiment>/<preset>-seed<N> for N > 0)
train_missing = None  # None: train what results/ lacks, except during the book build; True; False
results_dir = None  # None: results/ at the repository root
query = 0  # which saved query pixel the attention figures use (0: the grid's centre)

# %% tags=["hide-input"]
params = book.check_params(
    preset=preset, data=data, device=device, seed=seed, train_missing=train_missing, results_dir=results_dir
)
if isinstance(query, bool) or query not in range(4):
    raise book.ParameterError("query", query, "0, 1, 2, 3 (the saved query pixels)")

# %% tags=["hide-input"]
viz.set_style()
runs = book.load_all(experiments.names(), params)
book.glue_str("app_preset", params.preset)

# %% [markdown]
# ## A. Hyper-parameters
#
# ### Training, at the chosen preset (*{glue:text}`app_preset`*)
#
# One row per training protocol; a model and its HA variant always share one. "why" is the reason
# recorded next to the preset in the registry.

# %% tags=["hide-input"]
book.show_table(
    book.training_table(params.preset).reset_index(), caption=f"Training protocols at preset {params.preset}"
)

# %% [markdown]
# ### Training, at the papers' settings
#
# The `paper` preset follows the published protocols (the official code of {cite:t}`cordonnier2020relationship`
# and the [Re] configurations {cite}`varma2021code`):

# %% tags=["hide-input"]
book.show_table(book.training_table("paper").reset_index(), caption="Training protocols at preset paper")

# %% [markdown]
# ### Models
#
# Every field of every model's configuration at the chosen preset, one table per model family.

# %% tags=["hide-input"]
for family in ("paper", "resnet", "san", "vit"):
    book.show_table(
        book.model_table(params.preset, family).reset_index(names="experiment"),
        caption=f"{family} models at preset {params.preset}",
    )

# %% [markdown]
# ## B. Attention maps
#
# For each model: the attention of one fixed query pixel (outlined) for one test image, then averaged
# over the saved test images. For the paper's models and ViT each row is a layer (for HA models: an
# application of the shared block) and each column a head, with the mean over heads last; for SAN each
# panel is one layer's $K \times K$ window around the query pixel (weights averaged over the weight groups),
# and the averaged figure shows each weight group, averaged over pixels and images.
#
# ### B.1 Learned 2D encoding without content, 9 heads

# %% tags=["hide-input"]
book.show_attention(runs["learned_9h"], "learned_9h", params, query)

# %% [markdown]
# ### B.2 Learned 2D encoding without content, 16 heads

# %% tags=["hide-input"]
book.show_attention(runs["learned_16h"], "learned_16h", params, query)

# %% [markdown]
# ### B.3 Learned 2D encoding with content, 9 heads

# %% tags=["hide-input"]
book.show_attention(runs["learned_content_9h"], "learned_content_9h", params, query)

# %% [markdown]
# ### B.4 Learned 2D encoding with content, 16 heads

# %% tags=["hide-input"]
book.show_attention(runs["learned_content_16h"], "learned_content_16h", params, query)

# %% [markdown]
# ### B.5 Hierarchical learned 2D encoding with content, 9 heads

# %% tags=["hide-input"]
book.show_attention(runs["learned_content_9h_ha"], "learned_content_9h_ha", params, query)

# %% [markdown]
# ### B.6 Hierarchical learned 2D encoding with content, 16 heads

# %% tags=["hide-input"]
book.show_attention(runs["learned_content_16h_ha"], "learned_content_16h_ha", params, query)

# %% [markdown]
# ### B.7 Hierarchical SAN, pairwise

# %% tags=["hide-input"]
book.show_attention(runs["san_pairwise_ha"], "san_pairwise_ha", params, query)

# %% [markdown]
# ### B.8 Hierarchical SAN, patchwise

# %% tags=["hide-input"]
book.show_attention(runs["san_patchwise_ha"], "san_patchwise_ha", params, query)

# %% [markdown]
# ### B.9 ViT

# %% tags=["hide-input"]
book.show_attention(runs["vit"], "vit", params, query)

# %% [markdown]
# ### B.10 Hierarchical ViT

# %% tags=["hide-input"]
book.show_attention(runs["vit_ha"], "vit_ha", params, query)

# %% [markdown]
# ## C. Training curves
#
# Train (dashed) and test (solid) accuracy and loss after every epoch, for every saved run at the chosen
# preset.

# %% tags=["hide-input"]
histories = {name: run.history for name, run in runs.items() if run is not None}
if histories:
    book.show(viz.training_curves(histories, title=f"Training curves at preset {params.preset}"))
missing = [name for name, run in runs.items() if run is None]
if missing:
    book.note_missing("Training curves", params.preset, missing)
