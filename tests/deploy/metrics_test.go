package deploy

import (
	"strings"
	"testing"

	"github.com/zclconf/go-cty/cty"

	"github.com/loamhq/loam/shared/emf"
)

// TestMetricsWiring checks that what the autoscaling policies and alarms watch is what the
// services publish (shared/emf): metric names and units, the namespace, and dimensions whose
// values the services are given (LOAM_EMF_DEPLOYMENT, LOAM_ZONE, the voters' flags).
func TestMetricsWiring(t *testing.T) {
	c := loadDir(t, modulePath(t))
	e := evaluate(t, c, baseVars(3, ecrSequencer, ecrLognode))
	units := map[string]string{}
	for _, m := range append(append([]emf.Metric{}, emf.LogNodeMetrics...), emf.SequencerMetrics...) {
		units[m.Name] = m.Unit
	}
	ns := e.locals["metric_namespace"].AsString()
	env := stringMap(e.locals["lognode_environment"].GetAttr("eu-west-1a"))
	if env["LOAM_EMF_NAMESPACE"] != ns || env["LOAM_EMF_DEPLOYMENT"] != "loam" || env["LOAM_EMF_INTERVAL"] != "60s" {
		t.Errorf("log nodes publish to namespace %q deployment %q every %q; want %q, loam, 60s",
			env["LOAM_EMF_NAMESPACE"], env["LOAM_EMF_DEPLOYMENT"], env["LOAM_EMF_INTERVAL"], ns)
	}
	for id, ud := range e.renderUserData(t) {
		if !strings.Contains(ud, "--emf-interval 60s --emf-namespace "+ns+" --emf-deployment loam") {
			t.Errorf("voter %s does not publish its Leader metric:\n%s", id, ud)
		}
	}

	// The produce-bytes policy of a zone watches that zone's log nodes.
	pol := c.resources["aws_appautoscaling_policy.lognode_produce_bytes"]
	if pol == nil {
		t.Fatal("no aws_appautoscaling_policy.lognode_produce_bytes")
	}
	spec := mustBlock(t, mustBlock(t, pol.Body, "target_tracking_scaling_policy_configuration"), "customized_metric_specification")
	ctx := e.with("eu-west-1a", cty.StringVal("subnet-0a00000000000001"))
	name := e.value(t, attr(t, spec, "metric_name"), ctx).AsString()
	if units[name] == "" || e.value(t, attr(t, spec, "unit"), ctx).AsString() != units[name] {
		t.Errorf("produce-bytes policy tracks %q (unit %q): the log nodes publish %v", name, e.value(t, attr(t, spec, "unit"), ctx).AsString(), units)
	}
	if got := e.value(t, attr(t, spec, "namespace"), ctx).AsString(); got != ns {
		t.Errorf("produce-bytes policy namespace %q, want %q", got, ns)
	}
	dims := map[string]string{}
	for _, d := range blocksOf(spec, "dimensions") {
		dims[e.value(t, attr(t, d, "name"), ctx).AsString()] = e.value(t, attr(t, d, "value"), ctx).AsString()
	}
	if dims["Deployment"] != "loam" || dims["Zone"] != "eu-west-1a" || len(dims) != 2 {
		t.Errorf("produce-bytes policy dimensions %v, want Deployment=loam Zone=eu-west-1a (what LOAM_EMF_DEPLOYMENT and LOAM_ZONE give)", dims)
	}

	// Alarms on the services' own metrics name metrics they publish.
	for _, key := range c.resourcesOf("aws_cloudwatch_metric_alarm") {
		b := c.resources[key].Body
		if stringAttr(b, "namespace") == "" && !c.refersTo(attr(t, b, "namespace"), "local.metric_namespace") {
			continue
		}
		if !c.refersTo(attr(t, b, "namespace"), "local.metric_namespace") {
			continue
		}
		if m := stringAttr(b, "metric_name"); units[m] == "" {
			t.Errorf("%s watches %s/%s, which no service publishes", key, ns, m)
		}
	}
}
