"""Simulated durations. Timestamps stay wall-clock (kubectl computes ages from them); what a scenario
speeds up is how long things take: `timeScale: 10` makes a 30 s grace period last 3 s."""
from __future__ import annotations


class Clock:
    def __init__(self, time_scale: float = 1.0):
        if time_scale <= 0:
            raise ValueError("timeScale must be greater than 0")
        self.time_scale = float(time_scale)

    def real_seconds(self, simulated_seconds: float) -> float:
        return max(simulated_seconds, 0) / self.time_scale
