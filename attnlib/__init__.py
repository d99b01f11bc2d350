"""attnlib: can self-attention do what convolution does? (Cordonnier et al., ICLR 2020, and the [Re] report).

`import attnlib` imports nothing else; each name is imported from its home (CONTRIBUTING.md's module map):

    attnlib.data.load_cifar10           CIFAR-10 (torchvision pickle or ImageFolder copy) as uint8 tensors
    attnlib.experiments.build_model     a model of the registry by experiment name and preset
    attnlib.results.load.read           a saved run, read and checked, never trained
    attnlib.lab.run.run_or_load         a saved result, or train it
    attnlib.theory.attention_from_conv  the paper's construction: a convolution as multi-head attention
    attnlib.errors.ConfigError          the one exception type for bad user input
"""

__version__ = "0.1.0"
