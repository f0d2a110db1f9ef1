// Package release is the one place where kiln pins the versions of the
// components it builds from source (Kubernetes, etcd, CoreDNS, pause, the
// add-ons, containerd and runc) and names the container images the cluster
// runs. A Release is one Kubernetes release with its etcd and CoreDNS
// (Releases lists them, newest first; install-config's kubernetesVersion
// chooses one); the other pins are shared by every release. The node image
// builder (platforms/nodeimage) builds exactly a release's versions,
// and the manifests refer to images only through Release.Image, so the two
// cannot drift.
//
// Every image is a local image (registry kiln.local) imported into
// containerd at first boot; pods use imagePullPolicy: Never. Inside each
// image the component's binary is /usr/local/bin/<name>.
package release
