#!/usr/bin/env bash
# Make a minimal local Debian bookworm base image for the worker image, for
# machines that reach Debian's package mirror but no container registry.
#
#   worker_image/make-base-image.sh [TAG]      (default tag: tfcluster-base:bookworm)
#
# debootstrap --variant=minbase + `docker import` (~40 s). The result has no
# Python: worker_image/Dockerfile installs python3.11 from Debian when its
# base has none. Needs root, debootstrap and a running Docker engine.
set -euo pipefail

tag="${1:-tfcluster-base:bookworm}"
mirror="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"

if ! command -v debootstrap >/dev/null; then
    apt-get update -qq && apt-get install -y -qq debootstrap >/dev/null
fi

rootfs="$(mktemp -d /tmp/tfcluster-rootfs.XXXXXX)"
trap 'rm -rf "$rootfs"' EXIT

echo "debootstrap bookworm (minbase) into $rootfs from $mirror"
debootstrap --variant=minbase bookworm "$rootfs" "$mirror" >/dev/null
# Slim the rootfs like the official debian:*-slim images do.
rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/* \
       "$rootfs"/usr/share/doc/* "$rootfs"/usr/share/man/* "$rootfs"/usr/share/locale/*

tar -C "$rootfs" --numeric-owner -c . \
    | docker import --change 'CMD ["/bin/bash"]' - "$tag" >/dev/null
echo "made $tag ($(docker image inspect --format '{{.Size}}' "$tag") bytes)"
