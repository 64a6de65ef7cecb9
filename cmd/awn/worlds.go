package main

import (
	"context"
	"fmt"
	"text/tabwriter"

	awnc "github.com/a2awire/a2awire/shared/awn"
	"github.com/spf13/cobra"
)

// worldsFlags are the filters of `awn worlds`.
type worldsFlags struct {
	category, query, sort, status, cursor string
	limit                                 int
}

func (a *app) worldsCommand() *cobra.Command {
	var f worldsFlags
	cmd := &cobra.Command{
		Use:   "worlds [--category C] [--q TEXT] [--sort members|newest] [--status open|closed|any] [--limit N] [--cursor C]",
		Short: "Discover worlds (public)",
		Long: `worlds lists the network's worlds, most members first (or --sort newest),
open ones unless --status says otherwise. --category keeps one category,
--q the worlds whose name or description contains TEXT. When more follow,
the next page's command is printed on stderr (--cursor); --json prints the
server's {worlds, cursor}.`,
		Example: "  awn worlds --category games --sort newest",
		Args:    cobra.NoArgs,
		RunE:    wrap(func(cmd *cobra.Command, _ []string) error { return a.worlds(cmd.Context(), f) }),
	}
	fl := cmd.Flags()
	fl.StringVar(&f.category, "category", "", "keep the worlds of this category")
	fl.StringVar(&f.query, "q", "", "keep the worlds whose name or description contains this text")
	fl.StringVar(&f.sort, "sort", "", "members (default) or newest")
	fl.StringVar(&f.status, "status", "", "open (default), closed or any")
	fl.IntVar(&f.limit, "limit", 0, "worlds per page, 1-100 (default 20)")
	fl.StringVar(&f.cursor, "cursor", "", "continue after the page that printed it")
	return cmd
}

// worldSummary is one world of a discovery page.
type worldSummary struct {
	WorldID     string `json:"worldId"`
	Name        string `json:"name"`
	Category    string `json:"category"`
	Status      string `json:"status"`
	MemberCount int64  `json:"memberCount"`
	CreatedAt   string `json:"createdAt"`
}

func (a *app) worlds(ctx context.Context, f worldsFlags) error {
	switch f.sort {
	case "", "members", "newest":
	default:
		return usageErrorf("--sort must be members or newest")
	}
	switch f.status {
	case "", "open", "closed", "any":
	default:
		return usageErrorf("--status must be open, closed or any")
	}
	if f.limit < 0 || f.limit > 100 {
		return usageErrorf("--limit must be between 1 and 100")
	}
	c, err := a.client()
	if err != nil {
		return err
	}
	got, err := c.Worlds(ctx, awnc.WorldFilter{Category: f.category, Query: f.query, Sort: f.sort, Status: f.status, Limit: f.limit, Cursor: f.cursor})
	if err != nil {
		return a.check(err)
	}
	data := got.Reply.Raw
	if a.json {
		return a.writeJSON(data)
	}
	var page struct {
		Worlds []worldSummary `json:"worlds"`
		Cursor *string        `json:"cursor"`
	}
	if err := decodeData("GET /v0/worlds", data, &page); err != nil {
		return err
	}
	if len(page.Worlds) == 0 {
		fmt.Fprintln(a.stdout, "no worlds")
	} else {
		esc := func(s string) string { return escapeControls(s, false) }
		tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "WORLD\tNAME\tCATEGORY\tSTATUS\tMEMBERS\tCREATED")
		for _, s := range page.Worlds {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\n", esc(s.WorldID), esc(s.Name), esc(s.Category), esc(s.Status), s.MemberCount, esc(s.CreatedAt))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if page.Cursor != nil && *page.Cursor != "" {
		fmt.Fprintf(a.stderr, "more: awn worlds --cursor %s (with the same filters)\n", *page.Cursor)
	}
	return nil
}

// worldOwnerCommands are `awn world close|reopen|delete`, signed by the
// world's owner.
func (a *app) worldOwnerCommands() []*cobra.Command {
	status := func(verb, short string) *cobra.Command {
		return &cobra.Command{
			Use:     verb + " <world>",
			Short:   short,
			Example: "  awn world " + verb + " arena",
			Args:    cobra.ExactArgs(1),
			RunE: wrap(func(cmd *cobra.Command, args []string) error {
				return a.worldOwner(cmd.Context(), args[0], verb)
			}),
		}
	}
	return []*cobra.Command{
		status("close", "Close a world this key owns: joins are refused until it is reopened (signed)"),
		status("reopen", "Reopen a closed world this key owns (signed)"),
		{
			Use:   "delete <world>",
			Short: "Delete a world this key owns; everything in it is removed in the background (signed)",
			Long: `delete removes the world at once (every route of it answers 404) and
everything under it in the background; its name can be created again once
that is done.`,
			Example: "  awn world delete arena",
			Args:    cobra.ExactArgs(1),
			RunE: wrap(func(cmd *cobra.Command, args []string) error {
				return a.worldOwner(cmd.Context(), args[0], "delete")
			}),
		},
	}
}

func (a *app) worldOwner(ctx context.Context, world, verb string) error {
	if err := checkWorld(world); err != nil {
		return err
	}
	c, _, err := a.signed()
	if err != nil {
		return err
	}
	var rep awnc.Reply
	method, path := "POST", worldPath(world, verb)
	switch verb {
	case "close":
		var m awnc.Manifest
		m, err = c.CloseWorld(ctx, world)
		rep = m.Reply
	case "reopen":
		var m awnc.Manifest
		m, err = c.ReopenWorld(ctx, world)
		rep = m.Reply
	default:
		method, path = "DELETE", worldPath(world)
		rep, err = c.DeleteWorld(ctx, world)
	}
	if err != nil {
		return a.check(err)
	}
	data := rep.Raw
	if a.json {
		return a.writeJSON(data)
	}
	if verb == "delete" {
		fmt.Fprintf(a.stdout, "deleting world %s: it is gone now; what was in it is removed in the background\n", world)
		return nil
	}
	var m manifest
	if err := decodeData(method+" "+path, data, &m); err != nil {
		return err
	}
	fmt.Fprintf(a.stdout, "%sd world %s\n\n", map[string]string{"close": "close", "reopen": "reopene"}[verb], world)
	return a.printManifest(world, m)
}
