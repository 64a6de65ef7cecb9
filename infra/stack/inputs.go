package stack

import (
	"fmt"
	"slices"

	"github.com/a2awire/a2awire/shared/routes"
)

// Inputs turns the function folders of the checkout into the stack's routes
// and functions: every folder is a function (with routes.Config's settings),
// whether or not a route names it yet, and every route of the table is
// served. A function the route table knows but no folder provides is an
// error, because deploying its routes would point API Gateway at nothing.
func Inputs(folders []string) ([]routes.Route, []routes.Function, error) {
	var missing []string
	for _, name := range routes.Functions() {
		if !slices.Contains(folders, name) {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		return nil, nil, fmt.Errorf("route table names functions without a functions/<name> folder: %v", missing)
	}
	fns := make([]routes.Function, 0, len(folders))
	for _, name := range folders {
		fns = append(fns, routes.Config(name))
	}
	return routes.All(), fns, nil
}
