//go:build tools

// Package crictl pins crictl, the CRI client .ci/k8s.sh and .ci/k8s-stop.sh use to stop and remove the
// node's pod sandboxes through the runtime (their network torn down by CNI). Its own module: its
// dependencies are newer than the Kubernetes components'. Test infrastructure, not part of tfcluster.
package crictl

import (
	_ "sigs.k8s.io/cri-tools/cmd/crictl"
)
