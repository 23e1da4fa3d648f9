package deploy

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// TestNATSOnlyForItsClients: NATS takes no credentials and holds every run's events,
// checkpoints and tool call records, and its monitoring port serves its connections, streams
// and consumers (a WatchRun's consumer is filtered on its run's id). In production its
// NetworkPolicy admits the pods that set NATS_URL (the orchestrator and action) to its client
// port, and nothing else to any of its ports: the kubelet's probes need no rule, traffic from
// the pod's node being always allowed.
func TestNATSOnlyForItsClients(t *testing.T) {
	r := render(t, "k8s/overlays/production")
	nats := r.statefulSets["nats"]
	if nats == nil {
		t.Fatal("no StatefulSet nats")
	}
	pod := nats.Spec.Template
	peers := map[string]map[string]string{"a pod of no Deployment here": {"app.kubernetes.io/name": "intruder"}}
	for name, d := range r.deployments {
		peers[name] = d.Spec.Template.Labels
	}
	for _, port := range pod.Spec.Containers[0].Ports {
		for peer, peerLabels := range peers {
			want := false
			if d := r.deployments[peer]; d != nil && port.Name == "client" {
				want = envValue(d.Spec.Template.Spec.Containers[0], "NATS_URL") != ""
			}
			if got := admitted(t, r, pod, port, peerLabels); got != want {
				t.Errorf("NATS's %s port %d admits %s: %v, want %v", port.Name, port.ContainerPort, peer, got, want)
			}
		}
	}
}

// admitted reports whether the NetworkPolicies of r let a pod of the same namespace with the
// labels from reach port of the pods of to. A policy's peer that is not a pod selector (a
// namespace selector or an IP block) admits pods beyond the namespace's, which fails the test.
func admitted(t *testing.T, r *rendered, to corev1.PodTemplateSpec, port corev1.ContainerPort, from map[string]string) bool {
	t.Helper()
	isolated := false
	for name, p := range r.policies {
		if !selects(t, &p.Spec.PodSelector, to.Labels) || !hasIngress(p) {
			continue
		}
		isolated = true
		for _, rule := range p.Spec.Ingress {
			if !rulePort(rule.Ports, port) {
				continue
			}
			if len(rule.From) == 0 {
				return true
			}
			for _, peer := range rule.From {
				if peer.PodSelector == nil || peer.NamespaceSelector != nil || peer.IPBlock != nil {
					t.Errorf("NetworkPolicy %s admits pods beyond the namespace's: %+v", name, peer)
					continue
				}
				if selects(t, peer.PodSelector, from) {
					return true
				}
			}
		}
	}
	return !isolated
}

// hasIngress reports whether the policy p isolates the pods it selects for ingress.
func hasIngress(p *networkingv1.NetworkPolicy) bool {
	if len(p.Spec.PolicyTypes) == 0 {
		return true
	}
	for _, pt := range p.Spec.PolicyTypes {
		if pt == networkingv1.PolicyTypeIngress {
			return true
		}
	}
	return false
}

// rulePort reports whether the ports of a rule (none: every port) include port, by number or
// name.
func rulePort(ports []networkingv1.NetworkPolicyPort, port corev1.ContainerPort) bool {
	if len(ports) == 0 {
		return true
	}
	for _, p := range ports {
		if p.Port == nil || p.Port.String() == port.Name || p.Port.IntValue() == int(port.ContainerPort) {
			return true
		}
	}
	return false
}

// selects reports whether the label selector sel matches the labels l.
func selects(t *testing.T, sel *metav1.LabelSelector, l map[string]string) bool {
	t.Helper()
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		t.Fatalf("label selector %+v: %v", sel, err)
	}
	return s.Matches(labels.Set(l))
}
