package seal

import (
	"fmt"
	"strings"
)

// Sui programmable transactions, only as far as Seal needs them: a
// transaction-kind-only PTB whose commands call the policy's seal_approve*
// function with the inner ID as the first argument. Key servers dry-run it
// with the requester as sender; it is never executed, so it needs no gas.

// CallArgKind is the kind of a PTB input.
type CallArgKind uint8

// PTB input kinds. ImmOrOwned, Shared and Receiving are Sui's ObjectArg
// variants inside CallArg::Object.
const (
	ArgPure CallArgKind = iota
	ArgImmOrOwned
	ArgShared
	ArgReceiving
)

// CallArg is one PTB input.
type CallArg struct {
	Kind     CallArgKind
	Pure     []byte   // ArgPure: the BCS bytes of the value
	ObjectID Address  // object inputs
	Version  uint64   // ImmOrOwned/Receiving: version; Shared: initial shared version
	Digest   [32]byte // ImmOrOwned/Receiving
	Mutable  bool     // Shared
}

// PureBytesArg is a pure vector<u8> input (how the inner ID is passed).
func PureBytesArg(b []byte) CallArg {
	w := &bcsWriter{}
	w.bytes(b)
	return CallArg{Kind: ArgPure, Pure: w.b}
}

// SharedObjectArg is a shared-object input, such as an allowlist. Building it
// needs no RPC when the initial shared version is known (it is fixed when the
// object is shared); key servers resolve objects to their latest version.
func SharedObjectArg(id Address, initialSharedVersion uint64, mutable bool) CallArg {
	return CallArg{Kind: ArgShared, ObjectID: id, Version: initialSharedVersion, Mutable: mutable}
}

// OwnedObjectArg is an immutable or owned object input.
func OwnedObjectArg(id Address, version uint64, digest [32]byte) CallArg {
	return CallArg{Kind: ArgImmOrOwned, ObjectID: id, Version: version, Digest: digest}
}

// ArgumentKind is the kind of a command argument.
type ArgumentKind uint8

// Command argument kinds, with their BCS tags.
const (
	ArgGasCoin ArgumentKind = iota
	ArgInput
	ArgResult
	ArgNestedResult
)

// Argument is a command argument.
type Argument struct {
	Kind  ArgumentKind
	Index uint16 // Input, Result, NestedResult
	Sub   uint16 // NestedResult
}

// MoveCall is a PTB MoveCall command.
type MoveCall struct {
	Package  Address
	Module   string
	Function string
	TypeArgs [][]byte // BCS TypeTags, validated and kept raw
	Args     []Argument
}

// PTB is a Sui ProgrammableTransaction restricted to MoveCall commands.
type PTB struct {
	Inputs   []CallArg
	Commands []MoveCall
}

// Limits of the PTBs this package builds and accepts.
const (
	MaxPTBCommands = 100
	maxPTBInputs   = 1024
	maxTypeDepth   = 8
	maxIdentLen    = 128
)

// Approve describes the policy call a key request makes:
// Package::Module::Function(id, Args...). The key servers dry-run it with the
// requester as sender and release keys only if it does not abort.
type Approve struct {
	Module   string // the policy module, e.g. "allowlist"
	Function string // default "seal_approve"; must start with seal_approve
	// Package is the package to call: the latest version of the policy
	// package; zero means the configuration's PackageID (no upgrades).
	Package Address
	// Args follow the ID, e.g. a SharedObjectArg for an allowlist.
	Args []CallArg
}

// BuildPTB builds the seal_approve PTB for the given inner IDs: one pure
// vector<u8> input per ID, then the extra arguments, and one MoveCall per ID.
func (a Approve) BuildPTB(pkg Address, ids [][]byte) (*PTB, error) {
	fn := a.Function
	if fn == "" {
		fn = "seal_approve"
	}
	if !strings.HasPrefix(fn, "seal_approve") {
		return nil, fmt.Errorf("%w: function %q does not start with seal_approve", ErrInvalidConfig, fn)
	}
	if err := checkIdent(a.Module); err != nil {
		return nil, fmt.Errorf("%w: module: %w", ErrInvalidConfig, err)
	}
	if err := checkIdent(fn); err != nil {
		return nil, fmt.Errorf("%w: function: %w", ErrInvalidConfig, err)
	}
	if a.Package != (Address{}) {
		pkg = a.Package
	}
	if len(ids) == 0 || len(ids) > MaxPTBCommands || len(ids)+len(a.Args) > maxPTBInputs {
		return nil, fmt.Errorf("%w: %d IDs, want 1 to %d", ErrInvalidConfig, len(ids), MaxPTBCommands)
	}
	for i, arg := range a.Args {
		if arg.Kind > ArgReceiving {
			return nil, fmt.Errorf("%w: argument %d has unknown kind %d", ErrInvalidConfig, i, arg.Kind)
		}
	}
	p := &PTB{}
	for _, id := range ids {
		p.Inputs = append(p.Inputs, PureBytesArg(id))
	}
	p.Inputs = append(p.Inputs, a.Args...)
	for i := range ids {
		args := []Argument{{Kind: ArgInput, Index: uint16(i)}}
		for j := range a.Args {
			args = append(args, Argument{Kind: ArgInput, Index: uint16(len(ids) + j)})
		}
		p.Commands = append(p.Commands, MoveCall{Package: pkg, Module: a.Module, Function: fn, Args: args})
	}
	return p, nil
}

// MarshalBCS returns the BCS of the ProgrammableTransaction (without the
// TransactionKind tag: the SDK's txBytes.slice(1)).
func (p *PTB) MarshalBCS() []byte {
	w := &bcsWriter{}
	w.uleb(uint64(len(p.Inputs)))
	for _, in := range p.Inputs {
		switch in.Kind {
		case ArgPure:
			w.u8(0)
			w.bytes(in.Pure)
		case ArgImmOrOwned, ArgReceiving:
			w.u8(1)
			if in.Kind == ArgImmOrOwned {
				w.u8(0)
			} else {
				w.u8(2)
			}
			w.raw(in.ObjectID[:])
			w.u64(in.Version)
			w.bytes(in.Digest[:])
		case ArgShared:
			w.u8(1)
			w.u8(1)
			w.raw(in.ObjectID[:])
			w.u64(in.Version)
			w.boolean(in.Mutable)
		}
	}
	w.uleb(uint64(len(p.Commands)))
	for _, c := range p.Commands {
		w.u8(0) // MoveCall
		w.raw(c.Package[:])
		w.str(c.Module)
		w.str(c.Function)
		w.uleb(uint64(len(c.TypeArgs)))
		for _, t := range c.TypeArgs {
			w.raw(t)
		}
		w.uleb(uint64(len(c.Args)))
		for _, a := range c.Args {
			w.u8(uint8(a.Kind))
			switch a.Kind {
			case ArgInput, ArgResult:
				w.u16(a.Index)
			case ArgNestedResult:
				w.u16(a.Index)
				w.u16(a.Sub)
			}
		}
	}
	return w.b
}

// ParsePTB decodes a ProgrammableTransaction strictly. Commands other than
// MoveCall are refused with ErrInvalidPTB (they can never be a valid key
// request); malformed bytes with ErrMalformed.
func ParsePTB(b []byte) (*PTB, error) {
	r := &bcsReader{b: b}
	p := &PTB{}
	n := r.length(2)
	if r.err == nil && n > maxPTBInputs {
		return nil, fmt.Errorf("%w: %d inputs, at most %d", ErrInvalidPTB, n, maxPTBInputs)
	}
	for i := 0; i < n && r.err == nil; i++ {
		in, err := readCallArg(r)
		if err != nil {
			return nil, fmt.Errorf("parse PTB: input %d: %w", i, err)
		}
		p.Inputs = append(p.Inputs, in)
	}
	n = r.length(1)
	if r.err == nil && n > MaxPTBCommands {
		return nil, fmt.Errorf("%w: %d commands, at most %d", ErrInvalidPTB, n, MaxPTBCommands)
	}
	for i := 0; i < n && r.err == nil; i++ {
		if tag := r.uleb(); r.err == nil && tag != 0 {
			return nil, fmt.Errorf("%w: command %d is not a MoveCall (tag %d)", ErrInvalidPTB, i, tag)
		}
		var c MoveCall
		copy(c.Package[:], r.take(AddressSize))
		c.Module = readIdent(r)
		c.Function = readIdent(r)
		nt := r.length(1)
		for j := 0; j < nt && r.err == nil; j++ {
			start := r.off
			skipTypeTag(r, 0)
			if r.err == nil {
				c.TypeArgs = append(c.TypeArgs, r.b[start:r.off:r.off])
			}
		}
		na := r.length(1)
		for j := 0; j < na && r.err == nil; j++ {
			a := Argument{Kind: ArgumentKind(r.uleb())}
			switch a.Kind {
			case ArgGasCoin:
			case ArgInput, ArgResult:
				a.Index = r.u16()
			case ArgNestedResult:
				a.Index, a.Sub = r.u16(), r.u16()
			default:
				r.fail("unknown argument tag %d", a.Kind)
			}
			c.Args = append(c.Args, a)
		}
		p.Commands = append(p.Commands, c)
	}
	if err := r.finish(); err != nil {
		return nil, fmt.Errorf("parse PTB: %w: %w", ErrMalformed, err)
	}
	return p, nil
}

func readCallArg(r *bcsReader) (CallArg, error) {
	var in CallArg
	switch tag := r.uleb(); {
	case r.err != nil:
		return in, fmt.Errorf("%w: %w", ErrMalformed, r.err)
	case tag == 0:
		in.Kind = ArgPure
		in.Pure = r.bytes()
	case tag == 1:
		switch obj := r.uleb(); {
		case r.err != nil:
		case obj == 0 || obj == 2:
			in.Kind = ArgImmOrOwned
			if obj == 2 {
				in.Kind = ArgReceiving
			}
			copy(in.ObjectID[:], r.take(AddressSize))
			in.Version = r.u64()
			d := r.bytes()
			if r.err == nil && len(d) != 32 {
				return in, fmt.Errorf("%w: object digest is %d bytes, want 32", ErrMalformed, len(d))
			}
			copy(in.Digest[:], d)
		case obj == 1:
			in.Kind = ArgShared
			copy(in.ObjectID[:], r.take(AddressSize))
			in.Version = r.u64()
			in.Mutable = r.boolean()
		default:
			return in, fmt.Errorf("%w: unknown object argument tag %d", ErrMalformed, obj)
		}
	case tag == 2:
		return in, fmt.Errorf("%w: funds-withdrawal inputs", ErrInvalidPTB)
	default:
		return in, fmt.Errorf("%w: unknown input tag %d", ErrMalformed, tag)
	}
	if r.err != nil {
		return in, fmt.Errorf("%w: %w", ErrMalformed, r.err)
	}
	return in, nil
}

func readIdent(r *bcsReader) string {
	b := r.bytes()
	if r.err != nil {
		return ""
	}
	if err := checkIdent(string(b)); err != nil {
		r.fail("%v", err)
		return ""
	}
	return string(b)
}

// checkIdent accepts Move identifiers: a letter, or an underscore followed
// by at least one more character, then letters, digits and underscores.
func checkIdent(s string) error {
	if s == "" || len(s) > maxIdentLen || s == "_" {
		return fmt.Errorf("invalid Move identifier %q", s)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		ok := c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || i > 0 && '0' <= c && c <= '9'
		if !ok {
			return fmt.Errorf("invalid Move identifier %q", s)
		}
	}
	return nil
}

func skipTypeTag(r *bcsReader, depth int) {
	if depth > maxTypeDepth {
		r.fail("type tag nested deeper than %d", maxTypeDepth)
		return
	}
	switch tag := r.uleb(); tag {
	case 0, 1, 2, 3, 4, 5, 8, 9, 10:
	case 6:
		skipTypeTag(r, depth+1)
	case 7:
		r.take(AddressSize)
		readIdent(r)
		readIdent(r)
		n := r.length(1)
		for i := 0; i < n && r.err == nil; i++ {
			skipTypeTag(r, depth+1)
		}
	default:
		r.fail("unknown type tag %d", tag)
	}
}

// ApproveIDs applies the key server's rules for a valid key request (Seal's
// ValidPtb) and returns the called package and the inner IDs: at least one
// input and one command, at most 100 commands, every command a MoveCall to
// one package and a function starting with seal_approve, every argument an
// input in range, and the first argument a pure input holding exactly a BCS
// vector<u8> (the inner ID).
func (p *PTB) ApproveIDs() (Address, [][]byte, error) {
	if len(p.Inputs) == 0 || len(p.Commands) == 0 {
		return Address{}, nil, fmt.Errorf("%w: empty PTB input or command", ErrInvalidPTB)
	}
	if len(p.Commands) > MaxPTBCommands {
		return Address{}, nil, fmt.Errorf("%w: %d commands, at most %d", ErrInvalidPTB, len(p.Commands), MaxPTBCommands)
	}
	pkg := p.Commands[0].Package
	ids := make([][]byte, 0, len(p.Commands))
	for i, c := range p.Commands {
		if c.Package != pkg || !strings.HasPrefix(c.Function, "seal_approve") {
			return Address{}, nil, fmt.Errorf("%w: command %d: invalid function or package id", ErrInvalidPTB, i)
		}
		if len(c.Args) == 0 {
			return Address{}, nil, fmt.Errorf("%w: command %d: no arguments", ErrInvalidPTB, i)
		}
		for _, a := range c.Args {
			if a.Kind != ArgInput || int(a.Index) >= len(p.Inputs) {
				return Address{}, nil, fmt.Errorf("%w: command %d: arguments must be inputs in range", ErrInvalidPTB, i)
			}
		}
		in := p.Inputs[c.Args[0].Index]
		if in.Kind != ArgPure {
			return Address{}, nil, fmt.Errorf("%w: command %d: the first argument is not a pure input", ErrInvalidPTB, i)
		}
		r := &bcsReader{b: in.Pure}
		id := r.bytes()
		if err := r.finish(); err != nil {
			return Address{}, nil, fmt.Errorf("%w: command %d: the first argument is not a BCS vector<u8>", ErrInvalidPTB, i)
		}
		ids = append(ids, id)
	}
	return pkg, ids, nil
}
