package stack

import (
	"fmt"
	"maps"
	"net/mail"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"github.com/a2awire/a2awire/shared/routes"
	"github.com/a2awire/a2awire/shared/store/schema"
)

// MaxRouteTimeoutS is API Gateway's integration timeout for HTTP APIs.
const MaxRouteTimeoutS = 30

var streamViews = []string{"NEW_AND_OLD_IMAGES", "NEW_IMAGE", "OLD_IMAGE", "KEYS_ONLY"}

var (
	stageRE    = regexp.MustCompile(`^[a-z][a-z0-9-]{0,19}$`)
	functionRE = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,47}$`)
)

// validate rejects inputs that CloudFormation would reject late (after
// minutes of deploying) or that would deploy something other than intended.
func validate(p Props) error {
	var errs []string
	fail := func(format string, args ...any) { errs = append(errs, fmt.Sprintf(format, args...)) }

	if !stageRE.MatchString(p.Stage) {
		fail("stage %q: want lower-case letters, digits and '-', starting with a letter, at most 20 characters", p.Stage)
	}
	if p.AssetDir == nil {
		fail("AssetDir is nil")
	}
	if err := validateTable(p.Table); err != nil {
		fail("%v", err)
	}
	fns := map[string]routes.Function{}
	for _, fn := range p.Functions {
		if !functionRE.MatchString(fn.Name) {
			fail("function %q: want lower-case letters, digits and '-', at most 48 characters", fn.Name)
		}
		if _, dup := fns[fn.Name]; dup {
			fail("function %q listed twice", fn.Name)
		}
		fns[fn.Name] = fn
		if fn.MemoryMB < 128 || fn.MemoryMB > 10240 {
			fail("function %q: memory %d MB outside 128..10240", fn.Name, fn.MemoryMB)
		}
		if fn.TimeoutSeconds < 1 || fn.TimeoutSeconds > 900 {
			fail("function %q: timeout %d s outside 1..900", fn.Name, fn.TimeoutSeconds)
		}
		if _, ok := fn.Env[TableNameEnv]; ok {
			fail("function %q: env %s is set by the deploy", fn.Name, TableNameEnv)
		}
		streams, schedules := 0, 0
		for _, tr := range fn.Triggers {
			switch tr.Kind {
			case routes.StreamTrigger:
				streams++
				if p.Table.StreamView == "" {
					fail("function %q: stream trigger but the table has no stream", fn.Name)
				}
				if tr.BatchSize < 0 || tr.BatchSize > MaxStreamBatchSize {
					fail("function %q: stream batch size %d outside 1..%d (0 means %d)", fn.Name, tr.BatchSize, MaxStreamBatchSize, routes.DefaultStreamBatchSize)
				}
				if tr.BatchWindowSeconds < 0 || tr.BatchWindowSeconds > MaxStreamBatchWindowS {
					fail("function %q: stream batch window %d s outside 0..%d", fn.Name, tr.BatchWindowSeconds, MaxStreamBatchWindowS)
				}
				if r := tr.StreamRetries(); r < -1 || r > 10000 {
					fail("function %q: stream retry attempts %d outside -1..10000", fn.Name, r)
				}
				if a := tr.StreamMaxRecordAge(); a != -1 && (a < 60 || a > 604800) {
					fail("function %q: stream max record age %d s: -1 or 60..604800", fn.Name, a)
				}
				if len(tr.Filters) > MaxStreamFilters {
					fail("function %q: %d stream filters, Lambda takes at most %d", fn.Name, len(tr.Filters), MaxStreamFilters)
				}
				for _, f := range tr.Filters {
					if f.Pattern() == "{}" {
						fail("function %q: an empty stream filter (it would match every record; leave Filters empty instead)", fn.Name)
					}
				}
			case routes.ScheduleTrigger:
				schedules++
				if len(tr.Filters) > 0 {
					fail("function %q: filters on a schedule trigger", fn.Name)
				}
				if !strings.HasPrefix(tr.Schedule, "rate(") && !strings.HasPrefix(tr.Schedule, "cron(") {
					fail("function %q: schedule %q is not a rate(...) or cron(...) expression", fn.Name, tr.Schedule)
				}
			case routes.QueueTrigger:
				// validateQueues checks it against the queue table.
			default:
				fail("function %q: unknown trigger kind %q", fn.Name, tr.Kind)
			}
		}
		if streams > 1 || schedules > 1 {
			fail("function %q: at most one stream and one schedule trigger", fn.Name)
		}
	}
	// API Gateway ends an integration at 30 s (503 to the client), so a
	// function serving routes must give up first; a streaming function's
	// routes are its function URL's, which lasts up to its timeout.
	for _, name := range slices.Sorted(maps.Keys(fns)) {
		if fns[name].TimeoutSeconds > MaxRouteTimeoutS && !fns[name].Streaming && slices.ContainsFunc(p.Routes, func(r routes.Route) bool { return r.Function == name }) {
			fail("function %q: timeout %d s serves routes, but API Gateway gives up after %d s", name, fns[name].TimeoutSeconds, MaxRouteTimeoutS)
		}
	}
	validateConcurrency(p, fns, fail)
	validateEdges(p, fail)
	validateQueues(p, fail)
	seen := map[string]string{}
	for _, r := range p.Routes {
		if _, ok := httpMethods[r.Method]; !ok {
			fail("route %q: method %q is not one of %v", r.Key(), r.Method, slices.Sorted(maps.Keys(httpMethods)))
		}
		if !strings.HasPrefix(r.Path, "/") {
			fail("route %q: path must start with '/'", r.Key())
		}
		if _, ok := fns[r.Function]; !ok {
			fail("route %q: function %q has no functions/%s folder", r.Key(), r.Function, r.Function)
		}
		// API Gateway treats /a/{x} and /a/{y} as the same route.
		shape := r.Method + " " + routes.Shape(r.Path)
		if prev, dup := seen[shape]; dup {
			fail("route %q: same API Gateway route as %q", r.Key(), prev)
		}
		seen[shape] = r.Key()
	}
	errs = append(errs, validateSeeding(p, fns, accessByFunction(p))...)
	if len(errs) > 0 {
		return fmt.Errorf("stack inputs: %s", strings.Join(errs, "; "))
	}
	return nil
}

func validateTable(t schema.Table) error {
	for _, a := range []schema.Attr{t.PartitionKey, t.SortKey} {
		if a.Name != "" {
			if _, ok := attributeTypes[a.Type]; !ok {
				return fmt.Errorf("table key %q: unsupported type %q", a.Name, a.Type)
			}
		}
	}
	if t.PartitionKey.Name == "" {
		return fmt.Errorf("table: no partition key")
	}
	for _, idx := range t.Indexes {
		if idx.Name == "" || idx.PartitionKey.Name == "" {
			return fmt.Errorf("table index %q: needs a name and a partition key", idx.Name)
		}
		for _, a := range []schema.Attr{idx.PartitionKey, idx.SortKey} {
			if _, ok := attributeTypes[a.Type]; a.Name != "" && !ok {
				return fmt.Errorf("index %s key %q: unsupported type %q", idx.Name, a.Name, a.Type)
			}
		}
	}
	if t.StreamView != "" && !slices.Contains(streamViews, t.StreamView) {
		return fmt.Errorf("table: stream view %q is not one of %v", t.StreamView, streamViews)
	}
	return nil
}

// validateConcurrency checks the reservations: each between 1 and the
// account's quota (0 would disable the function), keys that name a
// function or a class (a typo would otherwise be ignored), a queue
// consumer's at least its mapping's maximum concurrency (Lambda's poller
// would be throttled below it), and the sum leaving
// MinUnreservedConcurrency of the account unreserved, which AWS would
// otherwise refuse halfway through a deploy.
func validateConcurrency(p Props, fns map[string]routes.Function, fail func(string, ...any)) {
	account := p.AccountConcurrency
	if account == 0 {
		account = DefaultAccountConcurrency
	}
	if account < 0 {
		fail("account concurrency %d is negative", account)
		return
	}
	classes := map[string]bool{}
	for _, fn := range p.Functions {
		if c := FunctionClass(fn, p.Routes); c != "" {
			classes[c] = true
		}
	}
	for _, name := range slices.Sorted(maps.Keys(p.ReservedConcurrency)) {
		if _, ok := fns[name]; !ok && !classes[name] {
			fail("reserved concurrency for %q: no such function or function class (classes: %v)", name, slices.Sorted(maps.Keys(classes)))
		}
	}
	plan := PlanConcurrency(p)
	for _, name := range slices.Sorted(maps.Keys(plan.Reserved)) {
		n := plan.Reserved[name]
		if n < 1 {
			fail("function %q: reserved concurrency %d, want at least 1 (0 stops the function)", name, n)
		}
		if q := queueReservation(fns[name]); n < q {
			fail("function %q: reserved concurrency %d under its queue trigger's maximum concurrency %d", name, n, q)
		}
	}
	if plan.RequiredQuota > account && plan.Total > 0 {
		fail("reserved concurrency totals %d, but an account quota of %d allows at most %d (AWS keeps %d unreserved): "+
			"lower reservedConcurrency or raise the Lambda concurrency quota and set accountConcurrency",
			plan.Total, account, max(account-MinUnreservedConcurrency, 0), MinUnreservedConcurrency)
	}
}

// validateEdges checks the context values that shape the API's edge and
// its notifications: CORS origins, the custom domain and its certificate,
// the alarm address and the signing key secret's name.
func validateEdges(p Props, fail func(string, ...any)) {
	for _, o := range p.CorsOrigins {
		if o == "*" {
			continue
		}
		u, err := url.Parse(o)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" {
			fail("CORS origin %q: want * or scheme://host[:port]", o)
		}
	}
	if (p.DomainName == "") != (p.CertificateArn == "") {
		fail("a custom domain needs both domainName and certificateArn (an ACM certificate of the stack's region)")
	}
	if p.DomainName != "" && !domainRE.MatchString(p.DomainName) {
		fail("domainName %q: want a DNS name such as api.example.com", p.DomainName)
	}
	if p.CertificateArn != "" && !strings.HasPrefix(p.CertificateArn, "arn:") || strings.Contains(p.CertificateArn, " ") {
		fail("certificateArn %q: want arn:aws:acm:<region>:<account>:certificate/<id>", p.CertificateArn)
	}
	if p.AlarmEmail != "" {
		if a, err := mail.ParseAddress(p.AlarmEmail); err != nil || a.Address != p.AlarmEmail {
			fail("alarmEmail %q: want one plain address such as ops@example.com", p.AlarmEmail)
		}
	}
	if p.NetworkSigningKeySecret != "" {
		if _, _, err := ParseSigningKeySecret(p.NetworkSigningKeySecret); err != nil {
			fail("%v", err)
		}
	}
}

var domainRE = regexp.MustCompile(`^([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]{2,63}$`)
