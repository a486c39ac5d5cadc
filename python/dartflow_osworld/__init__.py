"""OSWorld sidecar: runs OSWorld's own task setup and evaluators (the `desktop-env` package) for a VM
that dartflow's `osworld` env leased from a GUI-Docker-Env cluster. See docs/osworld.md."""
