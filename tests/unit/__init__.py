"""Tests of modules on their own, without a server."""
