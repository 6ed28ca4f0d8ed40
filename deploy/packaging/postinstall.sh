#!/bin/sh
# After install or upgrade: make systemd see the unit, and restart the
# service if it runs (an upgrade). Enabling it is the operator's call:
#   systemctl enable --now rdma_doctor
set -e
if [ -d /run/systemd/system ]; then
	systemctl daemon-reload >/dev/null 2>&1 || true
	systemctl try-restart rdma_doctor.service >/dev/null 2>&1 || true
fi
