// Package kubetest gives the tests of kiln's commands a fake clientset
// whose raw REST requests (the discovery client's, which kiln uses for
// resources it has no typed client of: APIServices, MetalLB's records)
// reach a test server, since client-go's fake cannot serve them.
package kubetest

import (
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
)

// WithDiscovery is a fake clientset whose Discovery reaches a test server.
type WithDiscovery struct {
	*fake.Clientset
	d discovery.DiscoveryInterface
}

// Discovery implements kubernetes.Interface: the test server's client.
func (c WithDiscovery) Discovery() discovery.DiscoveryInterface { return c.d }

// Serve returns c with its discovery and raw REST requests sent to url
// (an httptest.Server's).
func Serve(c *fake.Clientset, url string) WithDiscovery {
	return WithDiscovery{c, discovery.NewDiscoveryClientForConfigOrDie(&rest.Config{Host: url, QPS: -1})}
}
