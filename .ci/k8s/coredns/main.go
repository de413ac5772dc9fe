// The test cluster's DNS server (.ci/k8s.sh): CoreDNS with only the plugins its Corefile uses, so that
// a cold build compiles the kubernetes plugin and not CoreDNS' cloud back ends. Not part of tfcluster.
//
// The plugins register themselves on import; their order of execution is CoreDNS' own
// (dnsserver.Directives, generated from its plugin.cfg), so this list only chooses which exist.
package main

import (
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/ready"
	_ "github.com/coredns/coredns/plugin/template"
)

func main() {
	coremain.Run()
}
