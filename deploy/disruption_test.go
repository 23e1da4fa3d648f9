package deploy

import (
	"path/filepath"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestReplicasSurviveADrain: an overlay that runs two replicas of a service at least (the
// production one: minReplicas 2) keeps one serving through a voluntary disruption, e.g.
// kubectl drain of a node. Each service's pods spread across nodes (a topology spread
// constraint on kubernetes.io/hostname counting its own pods), so that its replicas do not all
// land on one node, and a PodDisruptionBudget selecting its pods lets at most one of them be
// evicted at a time (maxUnavailable 1, or minAvailable 1), without ever blocking a drain of a
// service that runs one replica.
func TestReplicasSurviveADrain(t *testing.T) {
	for _, k := range kustomizations {
		t.Run(filepath.Base(k.dir), func(t *testing.T) {
			r := render(t, k.dir)
			for _, name := range meshServices {
				d := r.deployments[name]
				if d == nil {
					t.Errorf("no Deployment %s", name)
					continue
				}
				checkSpread(t, r, d)
				checkBudget(t, r, d)
			}
			if k.dir == "k8s/overlays/production" {
				for _, name := range meshServices {
					if h := r.hpas[name]; h == nil || h.Spec.MinReplicas == nil || *h.Spec.MinReplicas < 2 {
						t.Errorf("production: %s runs fewer than two replicas at least", name)
					}
				}
			}
		})
	}
}

// checkSpread checks that the pods of d spread across nodes: a topology spread constraint on
// kubernetes.io/hostname whose selector matches d's pods and no other Deployment's, with a
// maxSkew of 1 and ScheduleAnyway (a node short does not keep a replica from starting), or a
// preferred pod anti-affinity on kubernetes.io/hostname with such a selector.
func checkSpread(t *testing.T, r *rendered, d *appsv1.Deployment) {
	t.Helper()
	pod := d.Spec.Template.Spec
	for _, c := range pod.TopologySpreadConstraints {
		if c.TopologyKey != corev1.LabelHostname || c.LabelSelector == nil || !onlyItsPods(t, r, d, c.LabelSelector) {
			continue
		}
		if c.MaxSkew != 1 || c.WhenUnsatisfiable != corev1.ScheduleAnyway {
			t.Errorf("%s: spreads across nodes with maxSkew %d and %s, want 1 and ScheduleAnyway", d.Name, c.MaxSkew, c.WhenUnsatisfiable)
		}
		return
	}
	if a := pod.Affinity; a != nil && a.PodAntiAffinity != nil {
		for _, w := range a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution {
			if w.PodAffinityTerm.TopologyKey == corev1.LabelHostname && w.PodAffinityTerm.LabelSelector != nil && onlyItsPods(t, r, d, w.PodAffinityTerm.LabelSelector) {
				return
			}
		}
	}
	t.Errorf("%s: its pods do not spread across nodes (no topologySpreadConstraints or preferred pod anti-affinity on %s selecting its pods): its replicas may all land on one node and go down together", d.Name, corev1.LabelHostname)
}

// checkBudget checks that exactly one PodDisruptionBudget selects the pods of d, and only
// those, letting one be evicted at a time: maxUnavailable 1, or minAvailable 1.
func checkBudget(t *testing.T, r *rendered, d *appsv1.Deployment) {
	t.Helper()
	var budgets []*policyv1.PodDisruptionBudget
	for _, b := range r.budgets {
		if b.Spec.Selector != nil && selects(t, b.Spec.Selector, d.Spec.Template.Labels) {
			budgets = append(budgets, b)
		}
	}
	if len(budgets) != 1 {
		t.Errorf("%s: %d PodDisruptionBudgets select its pods, want 1: without one, kubectl drain may evict every replica at once", d.Name, len(budgets))
		return
	}
	b := budgets[0]
	if !onlyItsPods(t, r, d, b.Spec.Selector) {
		t.Errorf("PodDisruptionBudget %s selects the pods of other Deployments than %s", b.Name, d.Name)
	}
	maxU, minA := b.Spec.MaxUnavailable, b.Spec.MinAvailable
	switch {
	case maxU != nil && minA == nil && maxU.String() == "1":
	case minA != nil && maxU == nil && minA.String() == "1":
		// minAvailable 1 would block a drain of a service at one replica (memory on SQLite).
		if h := r.hpas[d.Name]; h == nil || h.Spec.MinReplicas == nil || *h.Spec.MinReplicas < 2 {
			t.Errorf("PodDisruptionBudget %s: minAvailable 1 for %s, which may run one replica: a drain could never evict it; use maxUnavailable 1", b.Name, d.Name)
		}
	default:
		t.Errorf("PodDisruptionBudget %s: maxUnavailable %v, minAvailable %v, want maxUnavailable 1 (or minAvailable 1)", b.Name, maxU, minA)
	}
}

// onlyItsPods reports whether the selector sel matches the pods of d and of no other Deployment
// or StatefulSet of r.
func onlyItsPods(t *testing.T, r *rendered, d *appsv1.Deployment, sel *metav1.LabelSelector) bool {
	t.Helper()
	if !selects(t, sel, d.Spec.Template.Labels) {
		return false
	}
	for name, o := range r.deployments {
		if name != d.Name && selects(t, sel, o.Spec.Template.Labels) {
			return false
		}
	}
	for _, o := range r.statefulSets {
		if selects(t, sel, o.Spec.Template.Labels) {
			return false
		}
	}
	return true
}
