// Package deploy holds what an operator needs to run a hermesd fleet
// (docs/fleet.md): Kubernetes manifests for etcd and for the nodes
// (kubernetes/), and the systemd unit of a node (systemd/). It has no
// code: its test loads the configuration the manifests carry and checks
// that the manifests agree with it and with each other, so a manifest
// that drifts from the schema or from the fleet's rules fails the build.
package deploy
