package plan

import (
	"container/heap"

	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
)

// Sort returns steps in a stable topological order: each comes after its dependencies, and
// among the steps that are ready, the one listed first goes first. The steps must have passed
// Check. It takes time O((steps + dependencies) · log steps), whatever the order they come in:
// a request sets its own step limit.
func Sort(steps []*typev1.Step) []*typev1.Step {
	index := make(map[string]int, len(steps))
	for i, st := range steps {
		index[st.GetId()] = i
	}
	waits := make([]int, len(steps))        // a step's dependencies not yet placed
	dependents := make([][]int, len(steps)) // the steps that depend on a step
	for i, st := range steps {
		for _, dep := range st.GetDependsOn() {
			j := index[dep]
			dependents[j] = append(dependents[j], i)
			waits[i]++
		}
	}
	ready := &firstListed{}
	for i := range steps {
		if waits[i] == 0 {
			*ready = append(*ready, i)
		}
	}
	heap.Init(ready)
	out := make([]*typev1.Step, 0, len(steps))
	for ready.Len() > 0 {
		i := heap.Pop(ready).(int)
		out = append(out, steps[i])
		for _, k := range dependents[i] {
			if waits[k]--; waits[k] == 0 {
				heap.Push(ready, k)
			}
		}
	}
	return out
}

// firstListed holds the indexes of the steps ready to place, the first listed on top
// (container/heap).
type firstListed []int

// Len is the number of ready steps.
func (h firstListed) Len() int { return len(h) }

// Less puts the step listed first on top.
func (h firstListed) Less(i, j int) bool { return h[i] < h[j] }

// Swap swaps two ready steps.
func (h firstListed) Swap(i, j int) { h[i], h[j] = h[j], h[i] }

// Push adds a ready step's index.
func (h *firstListed) Push(x any) { *h = append(*h, x.(int)) }

// Pop removes the last index.
func (h *firstListed) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
