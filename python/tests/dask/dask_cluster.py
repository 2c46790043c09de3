"""The LocalCluster of the dask tests (two worker processes, one thread each), made once for the
session and shared by test_dask.py and test_dask_persist.py, which load this file as a plugin
(pytest_plugins): starting a cluster takes seconds of the suite's time. Each module registers its
own servers on it (gpuscan.dask.register replaces the plugin)."""
import pytest

distributed = pytest.importorskip("distributed")


@pytest.fixture(scope="session")
def cluster():
    with distributed.LocalCluster(n_workers=2, processes=True, threads_per_worker=1, dashboard_address=None,
                                  silence_logs=40) as c:
        yield c
