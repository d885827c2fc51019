"""The container workflow of NVIDIA's Makefile.docker: build_docker, docker_add_user, launch_docker, prebuild,
configure_mig and teardown_mig. Standard library only: it runs on the host with the system's python3, before any
environment exists (`python3 -m code.docker --action=<target>`, through make)."""
