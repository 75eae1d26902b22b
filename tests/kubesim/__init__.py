"""kubesim: a small Kubernetes API server simulator for the collection's tests and demo.

It never imports from the collection (`plugins/`), and the collection never imports from it."""
