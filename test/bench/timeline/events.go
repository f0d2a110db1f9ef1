package main

import (
	"regexp"
	"sort"
	"strings"
)

// unitEvents name the systemd unit transitions worth a row: the key is the
// start of systemd's message.
var unitEvents = []struct{ prefix, name string }{
	{"Finished kiln-ignition.service", "Ignition applied"},
	{"Started containerd.service", "containerd started"},
	{"Starting kiln-images.service", "image import starts"},
	{"Finished kiln-images.service", "image import done"},
	{"Started kubelet.service", "kubelet started"},
	{"Started bootkube.service", "bootkube started"},
}

// bootkubeEvents match bootkube's log lines; a rule with a group names the
// machine it is about (an etcd member's node).
var bootkubeEvents = []struct {
	re   *regexp.Regexp
	name string
}{
	{regexp.MustCompile(`API up; applying manifests`), "temporary API ready (bootkube)"},
	{regexp.MustCompile(`manifests applied`), "manifests applied"},
	{regexp.MustCompile(`etcd member (\S+) added as learner`), "etcd learner added"},
	{regexp.MustCompile(`etcd member (\S+) promoted to voter`), "etcd learner promoted"},
	{regexp.MustCompile(`API servers on all \d+ masters ready`), "masters' API servers ready"},
	{regexp.MustCompile(`bootstrap etcd member removed`), "bootstrap etcd member removed (handover)"},
	{regexp.MustCompile(`bootstrap complete`), "bootstrap-complete recorded"},
}

// importing matches kiln-images' line for one image.
var importing = regexp.MustCompile(`^kiln-images: importing (\S+)`)

// journalEvents derives a machine's events from its journal; images adds a
// row per imported image.
func journalEvents(machine string, entries []journalEntry, images bool) []Event {
	var out []Event
	seen := map[string]bool{}
	add := func(e Event) {
		key := e.Name + "\x00" + e.Machine
		if !seen[key] {
			seen[key] = true
			out = append(out, e)
		}
	}
	for i, e := range entries {
		if i == 0 {
			add(Event{T: e.T, Name: "machine boots (first journal record)", Machine: machine})
		}
		switch {
		case e.Ident == "systemd":
			for _, u := range unitEvents {
				if strings.HasPrefix(e.Msg, u.prefix) {
					add(Event{T: e.T, Name: u.name, Machine: machine})
				}
			}
		case e.Ident == "import-images":
			if m := importing.FindStringSubmatch(e.Msg); m != nil && images {
				add(Event{T: e.T, Name: "importing " + m[1], Machine: machine})
			}
		case e.Unit == "bootkube.service":
			for _, r := range bootkubeEvents {
				m := r.re.FindStringSubmatch(e.Msg)
				if m == nil {
					continue
				}
				who := machine
				if len(m) > 1 {
					who = m[1]
				}
				add(Event{T: e.T, Name: r.name, Machine: who})
			}
		case e.Ident == "kubelet" && strings.Contains(e.Msg, "Successfully registered node"):
			add(Event{T: e.T, Name: "node registered (kubelet)", Machine: machine})
		}
	}
	return out
}

// containerEvents are the rows drawn from one container's log: its first
// line and the first line saying it serves.
var containerEvents = map[string]struct {
	started string
	serving []string
}{
	"etcd":           {"etcd starts", []string{"ready to serve client requests", "serving client traffic"}},
	"kube-apiserver": {"kube-apiserver starts", []string{"Serving securely on"}},
}

// containerServing names the event of a container's serving line.
func containerServing(container string) string { return container + " serving" }

// criEvents derives events from a container's log lines (all its restarts,
// in any order).
func criEvents(machine, container string, lines []criLine) []Event {
	rule, ok := containerEvents[container]
	if !ok || len(lines) == 0 {
		return nil
	}
	sort.SliceStable(lines, func(i, j int) bool { return lines[i].T.Before(lines[j].T) })
	out := []Event{{T: lines[0].T, Name: rule.started, Machine: machine}}
	for _, l := range lines {
		for _, s := range rule.serving {
			if strings.Contains(l.Msg, s) {
				return append(out, Event{T: l.T, Name: containerServing(container), Machine: machine})
			}
		}
	}
	return out
}

// nodeLine matches kiln's log lines about nodes.
var nodeLine = regexp.MustCompile(`msg="?Node (\S+) (registered|Ready)`)

// outputEvents derives events from kiln's stamped progress output: each
// step that ends (" ✓ title (12.3s)") and the first time kiln reports each
// node registered or Ready (each wait reports them again).
func outputEvents(lines []stampedLine) []Event {
	var out []Event
	seen := map[string]bool{}
	for _, l := range lines {
		text := strings.TrimSpace(l.Text)
		for _, mark := range []string{"✓ ", "✗ "} {
			if rest, ok := strings.CutPrefix(text, mark); ok {
				title, dur := rest, ""
				if i := strings.LastIndex(rest, " ("); i > 0 && strings.HasSuffix(rest, ")") {
					title, dur = rest[:i], rest[i+2:len(rest)-1]
				}
				name := "kiln: " + title
				if mark == "✗ " {
					name += " FAILED"
				}
				out = append(out, Event{T: l.T, Name: name, Machine: "host", Detail: "step took " + dur})
			}
		}
		if m := nodeLine.FindStringSubmatch(text); m != nil && !seen[m[1]+" "+m[2]] {
			seen[m[1]+" "+m[2]] = true
			out = append(out, Event{T: l.T, Name: "Node " + m[2] + " (kiln)", Machine: m[1]})
		}
	}
	return out
}

// machineStarted matches the provider's line for a started machine.
var machineStarted = regexp.MustCompile(`machine (\S+): started \(`)

// kilnLogEvents derives events from kiln's debug log (one-second
// resolution): each machine the provider started.
func kilnLogEvents(lines []stampedLine) []Event {
	var out []Event
	for _, l := range lines {
		if m := machineStarted.FindStringSubmatch(l.Text); m != nil {
			out = append(out, Event{T: l.T, Name: "machine started (kiln log, 1 s resolution)", Machine: m[1]})
		}
	}
	return out
}

// shortName drops the infrastructure ID from a machine or node name.
func shortName(name, infraID string) string {
	if infraID != "" {
		if s, ok := strings.CutPrefix(name, infraID+"-"); ok {
			return s
		}
	}
	return name
}

// sortEvents orders events by time; equal times keep their order.
func sortEvents(ev []Event) {
	sort.SliceStable(ev, func(i, j int) bool { return ev[i].T.Before(ev[j].T) })
}
