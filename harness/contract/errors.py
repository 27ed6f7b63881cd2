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
