# rdma_doctor's image, in the Prometheus exporters' style: the static binary
# promu builds for each platform (.build/OS-ARCH/rdma_doctor, make build does
# linux-amd64 for a local image), nothing else. FROM scratch: the binary is
# static (CGO_ENABLED=0) and the image needs no registry to build.
#
#   podman build --build-arg ARCH=amd64 -t rdma_doctor .
#   podman run -v /:/host:ro,rslave --net=host rdma_doctor
ARG ARCH="amd64"
ARG OS="linux"
FROM scratch
ARG ARCH="amd64"
ARG OS="linux"
LABEL org.opencontainers.image.title="rdma_doctor" \
      org.opencontainers.image.description="Prometheus exporter and diagnoser for InfiniBand and RoCE hosts" \
      org.opencontainers.image.source="https://github.com/rdma-doctor/rdma_doctor" \
      org.opencontainers.image.licenses="Apache-2.0"

COPY .build/${OS}-${ARCH}/rdma_doctor /bin/rdma_doctor
COPY LICENSE /LICENSE

EXPOSE 9873
# nobody: reading sysfs and procfs needs no privilege.
USER 65534:65534
ENTRYPOINT ["/bin/rdma_doctor"]
# The host's / is expected at /host, as node_exporter's images expect it.
CMD ["--path.rootfs=/host"]
