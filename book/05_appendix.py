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
# # 05_appendix
# Value: {glue:text}`x_05_appendix`. Cite {cite}`cordonnier2020relationship`.

# %% tags=["parameters"]
seed = 0
train_missing = None

# %%
import os, sys
from attnlib import book
params = book.check_params(seed=seed, train_missing=train_missing)
print(sys.executable, os.getcwd(), params)
book.glue_text("x_05_appendix", 0.5)
