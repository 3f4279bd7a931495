"""`pushserver-bench`: the fixed experiments of the classic event-service and push benchmarks."""
