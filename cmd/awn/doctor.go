package main

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"text/tabwriter"
	"time"

	awnc "github.com/a2awire/a2awire/shared/awn"
	"github.com/spf13/cobra"
)

// doctorReport is what `awn doctor` finds.
type doctorReport struct {
	URL       string `json:"url"`
	Reachable bool   `json:"reachable"`
	// Problem says why the network did not answer, "" when it did.
	Problem    string            `json:"problem,omitempty"`
	Home       string            `json:"home"`
	Identity   *identityJSON     `json:"identity"`
	Registered string            `json:"registered,omitempty"`
	Worlds     []json.RawMessage `json:"worlds"`
}

func (a *app) doctorCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "doctor",
		Short: "Say which network and identity awn uses, whether the network answers, and this agent's worlds",
		Long: `doctor answers the first questions: which URL awn talks to (--url, AWN_URL) and
whether a network answers there, which identity it signs with ($AWN_HOME, or
the profile of --as) and the agent name last registered from it, and the worlds
this key joined or owns. It exits 1 when the network does not answer, 0
otherwise (an identity not made yet is reported, with what to run).`,
		Args: cobra.NoArgs,
		RunE: wrap(func(cmd *cobra.Command, _ []string) error { return a.doctor(cmd.Context()) }),
	}
}

func (a *app) doctor(ctx context.Context) error {
	c, err := a.client()
	if err != nil {
		return err
	}
	home, err := a.home()
	if err != nil {
		return err
	}
	rep := doctorReport{URL: c.BaseURL(), Home: home, Worlds: []json.RawMessage{}}
	probe, cancel := context.WithTimeout(ctx, 5*time.Second)
	_, err = c.Discover(probe, awnc.Discovery{Limit: 1})
	cancel()
	rep.Reachable = err == nil
	if err != nil {
		rep.Problem = err.Error()
	}
	if me, err := a.identity(); err == nil {
		id := newIdentity(me)
		id.KeyFile = filepath.Join(home, keyFile)
		rep.Identity = &id
		if st, err := a.loadState(); err == nil {
			rep.Registered = st.LastRegistered
		}
		if rep.Reachable {
			if rep.Worlds, err = a.myWorlds(ctx); err != nil {
				return err
			}
		}
	}
	if a.json {
		if err := a.writeJSON(rep); err != nil {
			return err
		}
	} else if err := a.printDoctor(rep); err != nil {
		return err
	}
	if !rep.Reachable {
		return failed(fmt.Errorf("no network at %s", rep.URL))
	}
	return nil
}

func (a *app) printDoctor(rep doctorReport) error {
	tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	up := "yes"
	if !rep.Reachable {
		up = "no: " + escapeControls(rep.Problem, false)
	}
	fmt.Fprintf(tw, "network:\t%s\n", rep.URL)
	fmt.Fprintf(tw, "answers:\t%s\n", up)
	fmt.Fprintf(tw, "home:\t%s\n", rep.Home)
	if rep.Identity == nil {
		how := "awn init"
		if a.as != "" {
			how = "awn --as " + a.as + " init"
		}
		fmt.Fprintf(tw, "identity:\tnone yet (run '%s')\n", how)
	} else {
		fmt.Fprintf(tw, "identity:\t%s\n", rep.Identity.AWNID)
		name := rep.Registered
		if name == "" {
			name = "none from here (awn register)"
		}
		fmt.Fprintf(tw, "registered:\t%s\n", escapeControls(name, false))
		fmt.Fprintf(tw, "worlds:\t%d\n", len(rep.Worlds))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if rep.Identity != nil && len(rep.Worlds) > 0 {
		return a.printWorlds(rep.Worlds)
	}
	if !rep.Reachable {
		fmt.Fprintf(a.stderr, "awn: is the server running? Start the local one with 'make local' (or 'go run ./local'), or point --url (AWN_URL) at yours.\n")
	}
	return nil
}
