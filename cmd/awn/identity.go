package main

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"text/tabwriter"

	awnc "github.com/a2awire/a2awire/shared/awn"
	"github.com/spf13/cobra"
)

// identityJSON is what init and whoami print with --json.
type identityJSON struct {
	AWNID     string `json:"awnId"`
	KeyID     string `json:"keyId"`
	PublicKey string `json:"publicKey"`
	KeyFile   string `json:"keyFile,omitempty"`
}

func newIdentity(id awnc.Identity) identityJSON {
	return identityJSON{AWNID: id.AWNID(), KeyID: id.KeyID(), PublicKey: id.PublicKeyBase64()}
}

func (a *app) initCommand() *cobra.Command {
	var force bool
	cmd := &cobra.Command{
		Use:   "init [--force]",
		Short: "Create this agent's Ed25519 key in $AWN_HOME",
		Long: `init creates an Ed25519 key pair, the agent's identity, in $AWN_HOME/key.pem
(default ~/.config/awn; the file is 0600, the directory 0700) and prints its
awnId and keyid. An existing key is kept unless --force replaces it — which
loses the old identity and the agent names registered with it.`,
		Args: cobra.NoArgs,
		RunE: wrap(func(cmd *cobra.Command, _ []string) error {
			home, err := a.home()
			if err != nil {
				return err
			}
			me, err := awnc.CreateIdentity(home, force)
			if err != nil {
				if errors.Is(err, fs.ErrExist) {
					return usageErrorf("%s already holds a key; pass --force to replace it (the old identity is lost)", filepath.Join(home, awnc.KeyFile))
				}
				return err
			}
			id := newIdentity(me)
			id.KeyFile = me.File
			if a.json {
				return a.writeJSON(id)
			}
			return a.printIdentity(id)
		}),
	}
	cmd.Flags().BoolVar(&force, "force", false, "replace an existing key")
	return cmd
}

func (a *app) whoamiCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "whoami",
		Short: "Print this agent's awnId and keyid",
		Args:  cobra.NoArgs,
		RunE: wrap(func(cmd *cobra.Command, _ []string) error {
			me, err := a.identity()
			if err != nil {
				return err
			}
			id := newIdentity(me)
			if a.json {
				return a.writeJSON(id)
			}
			return a.printIdentity(id)
		}),
	}
}

func (a *app) printIdentity(id identityJSON) error {
	tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "awnId:\t%s\n", id.AWNID)
	fmt.Fprintf(tw, "keyId:\t%s\n", id.KeyID)
	if id.KeyFile != "" {
		fmt.Fprintf(tw, "key file:\t%s\n", id.KeyFile)
	}
	return tw.Flush()
}
