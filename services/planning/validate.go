package planning

import (
	"maps"
	"slices"
	"strings"

	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/stageerr"
)

// normalise validates proposed steps and returns trimmed copies in a stable topological order.
func normalise(proposed []*typev1.Step, tools map[string]*typev1.Tool, limit int) ([]*typev1.Step, error) {
	steps := make([]*typev1.Step, len(proposed))
	index := make(map[string]int, len(proposed))
	for i, p := range proposed {
		id := strings.TrimSpace(p.GetId())
		if id == "" {
			return nil, stageerr.Invalid("proposed step %d has an empty id", i+1)
		}
		if _, dup := index[id]; dup {
			return nil, stageerr.Invalid("duplicate step id %q", id)
		}
		index[id] = i
		steps[i] = &typev1.Step{
			Id:          id,
			Description: strings.TrimSpace(p.GetDescription()),
			ToolName:    strings.TrimSpace(p.GetToolName()),
		}
	}
	for i, p := range proposed {
		for _, d := range p.GetDependsOn() {
			dep := strings.TrimSpace(d)
			if _, ok := index[dep]; !ok {
				return nil, stageerr.Invalid("step %q depends on unknown step %q", steps[i].GetId(), dep)
			}
			if !slices.Contains(steps[i].DependsOn, dep) {
				steps[i].DependsOn = append(steps[i].DependsOn, dep)
			}
		}
	}
	if len(steps) > limit {
		return nil, stageerr.Errorf(typev1.StageErrorCode_STAGE_ERROR_CODE_PLAN_TOO_COMPLEX,
			"plan has %d steps, the limit is %d", len(steps), limit)
	}
	for _, st := range steps {
		if name := st.GetToolName(); name != "" && tools[name] == nil {
			return nil, stageerr.Errorf(typev1.StageErrorCode_STAGE_ERROR_CODE_NO_VIABLE_PLAN,
				"step %q uses tool %q, which is not available (%s)", st.GetId(), name, availableList(tools))
		}
	}
	if cycle := findCycle(steps, index); cycle != nil {
		return nil, stageerr.Errorf(typev1.StageErrorCode_STAGE_ERROR_CODE_NO_VIABLE_PLAN,
			"circular dependency: %s", strings.Join(cycle, " → "))
	}
	return topoSort(steps, index), nil
}

// availableList names the available tools for an error message.
func availableList(tools map[string]*typev1.Tool) string {
	if len(tools) == 0 {
		return "no tools are available"
	}
	return "available: " + strings.Join(slices.Sorted(maps.Keys(tools)), ", ")
}

// findCycle returns a dependency cycle as step ids, first id repeated at the end ("a", "b",
// "a" for a depends on b, b depends on a), or nil. Steps are visited in plan order, so the
// answer is deterministic.
func findCycle(steps []*typev1.Step, index map[string]int) []string {
	const (
		unvisited = iota
		onPath
		done
	)
	state := make([]int, len(steps))
	var path []int
	var visit func(i int) []string
	visit = func(i int) []string {
		state[i] = onPath
		path = append(path, i)
		for _, dep := range steps[i].GetDependsOn() {
			j := index[dep]
			switch state[j] {
			case onPath:
				start := slices.Index(path, j)
				cycle := make([]string, 0, len(path)-start+1)
				for _, k := range path[start:] {
					cycle = append(cycle, steps[k].GetId())
				}
				return append(cycle, steps[j].GetId())
			case unvisited:
				if c := visit(j); c != nil {
					return c
				}
			}
		}
		path = path[:len(path)-1]
		state[i] = done
		return nil
	}
	for i := range steps {
		if state[i] == unvisited {
			if c := visit(i); c != nil {
				return c
			}
		}
	}
	return nil
}

// topoSort orders acyclic steps so that each comes after its dependencies; among the steps
// that are ready, the one proposed first goes first.
func topoSort(steps []*typev1.Step, index map[string]int) []*typev1.Step {
	placed := make([]bool, len(steps))
	ready := func(i int) bool {
		return !slices.ContainsFunc(steps[i].GetDependsOn(), func(dep string) bool { return !placed[index[dep]] })
	}
	out := make([]*typev1.Step, 0, len(steps))
	for len(out) < len(steps) {
		for i := range steps {
			if !placed[i] && ready(i) {
				placed[i] = true
				out = append(out, steps[i])
				break
			}
		}
	}
	return out
}
