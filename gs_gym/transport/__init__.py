"""Worker processes, pipes, shared buffers and devices; knows nothing about tasks."""
