"""Sans-I/O framing: the bytes each transport puts on the wire, with no I/O and no HTTP."""
