"""Support shared by the test tiers (tests/unit, tests/integration, tests/kubesim/tests): the rebalance procedure's
verification policy, one `wait_for`, the simulator process and its setup blocks, and the least-privilege helpers.

Imported as the package `support`: pytest puts tests/ on sys.path (tests/conftest.py lives in a folder without
__init__.py, and tests/unit and tests/integration are packages below it; tests/kubesim/tests/conftest.py adds it
too). Test support only: neither the collection (plugins/) nor the simulator (tests/kubesim) imports it."""
