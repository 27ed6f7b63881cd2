"""The harness's suites. Installed, they are the package `harness.suites`: `pytest --pyargs harness.suites`."""
