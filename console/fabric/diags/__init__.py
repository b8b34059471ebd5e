"""infiniband-diags: a runner with timeouts and parsers of the tools' output."""
