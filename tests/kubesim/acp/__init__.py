"""Alauda Container Platform (ACP) behaviour around cluster plugins: the chart reconciler of a plugin's
rendered objects (`chart.py`), the ResourcePatch admission hook that records a user's edit of those objects
(`resourcepatch.py`) and ModuleInfo objects for scenarios (`moduleinfo.py`)."""
