#!/bin/sh
# Before removal (deb: "remove", rpm: 0 packages left), not on upgrade:
# stop and disable the service.
set -e
case "$1" in
remove | 0)
	if [ -d /run/systemd/system ]; then
		systemctl disable --now rdma_doctor.service >/dev/null 2>&1 || true
	fi
	;;
esac
