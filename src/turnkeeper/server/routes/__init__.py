"""One router per resource. Each route parses its input, calls the core once or twice, and
formats the result; errors are raised by the core and turned into problems in one place."""
