"""The run stage: rollouts over a universe and their metrics."""
