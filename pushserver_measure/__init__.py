"""What the burn-in and the bench both need: a raw HTTP/1.1 client's pieces, readings of this
machine and its processes, and the process settings a load generator wants."""
