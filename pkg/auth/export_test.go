package auth

import "context"

// RefuseCall is the check of a call's client certificate against a's CRLs
// (Authenticator.RefuseRevoked), nil without CRLs: what every call costs.
func RefuseCall(a *Authenticator, ctx context.Context) error {
	if a.crls == nil {
		return nil
	}
	return a.crls.refuse(ctx)
}
