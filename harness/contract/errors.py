"""Errors the harness raises for bad input. Each message names the file, tensor or entry at fault."""


class HarnessError(Exception):
    """Base class: a problem with the user's input, reported without a deep traceback."""


class CheckpointError(HarnessError):
    """A model directory or checkpoint file that cannot be loaded as an MTP bundle."""


class NoMTPWeightsError(CheckpointError):
    """The checkpoint holds a target model but no MTP layers."""


class UnknownLayoutError(CheckpointError):
    """The checkpoint has MTP-looking tensors in a layout the harness does not know."""


class FixtureError(HarnessError):
    """A malformed prompt fixture file."""


class WeightsNotLoaded(HarnessError):
    """A check asked for the checkpoint's weights in a run that loads none (--reference engine): the plugin reports
    the check as skipped, naming what it needed."""


class WeightFileOpened(HarnessError):
    """The harness process tried to read a weight file while it may read none (--reference engine)."""
