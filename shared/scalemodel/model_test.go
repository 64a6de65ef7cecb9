package scalemodel_test

import (
	"testing"

	"github.com/a2awire/a2awire/shared/scalemodel"
)

// TestModelLoads pins the hottest key of each workload and its load, the
// figures docs/scale.md's table states.
func TestModelLoads(t *testing.T) {
	for _, c := range []struct {
		w     scalemodel.Workload
		key   string
		units float64
	}{
		{scalemodel.WorldEvents(), "EVENTHEAD#<world>", 10000},
		{scalemodel.InboxMessages(), "WORLD#<world>", 4000},
		{scalemodel.FanOut(), "WORLD#<world>", 1000},
		{scalemodel.RegistryJoins(), "gsi1:WORLDS#mem#*", 2000},
	} {
		l := c.w.Loads()
		if len(l) == 0 || l[0].Key != c.key || l[0].Units != c.units || l[0].Over != c.units/scalemodel.PartitionWriteUnits {
			t.Errorf("%s: hottest %+v, want %s at %.0f units/s", c.w.Name, l, c.key, c.units)
		}
		for i := 1; i < len(l); i++ {
			if l[i].Units > l[i-1].Units {
				t.Errorf("%s: loads not hottest first: %+v", c.w.Name, l)
			}
		}
	}
}
