"""Built-in zstd dictionaries (tracepack.dictionaries); the .dict files are package data."""
