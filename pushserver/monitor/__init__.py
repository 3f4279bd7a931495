"""Watching the process: Prometheus metrics, GC pauses, CPU and memory."""
