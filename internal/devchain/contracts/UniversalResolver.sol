// SPDX-License-Identifier: MIT
// hermesd's own Universal-Resolver-compatible contract for tests and the
// devnet (ENS's artifacts are not on npm). It implements the interface
// clients call on ENS's Universal Resolver — resolve(bytes,bytes) and
// resolveWithGateways(bytes,bytes,string[]), returning (bytes, address) —
// over the ENSv1 registry: the ENSIP-10 resolver search, the extended
// resolve() call where the resolver supports it (an ancestor's resolver only
// through it), and an OffchainLookup from the resolver turned into one to a
// batch gateway (query((address,string[],bytes)[])), whose answer is handed
// to the resolver's callback in resolveCallback. Errors carry the same
// names and arguments as ENS's, so clients decode them as they do there.
pragma solidity 0.8.28;

interface IRegistry {
    function resolver(bytes32 node) external view returns (address);
}

interface IExtendedResolver {
    function resolve(bytes calldata name, bytes calldata data) external view returns (bytes memory);
}

interface IBatchGateway {
    struct Request {
        address sender;
        string[] urls;
        bytes data;
    }

    function query(Request[] memory requests) external view returns (bool[] memory failures, bytes[] memory responses);
}

error OffchainLookup(address sender, string[] urls, bytes callData, bytes4 callbackFunction, bytes extraData);

contract UniversalResolver {
    error ResolverNotFound(bytes name);
    error ResolverNotContract(bytes name, address resolver);
    error UnsupportedResolverProfile(bytes4 selector);
    error ResolverError(bytes errorData);
    error HttpError(uint16 status, string message);
    error InvalidBatchGatewayResponse();
    error DNSDecodingFailed(bytes dns);

    bytes4 private constant EXTENDED_RESOLVER = 0x9061b923;
    bytes4 private constant ERC165 = 0x01ffc9a7;

    IRegistry public immutable registry;
    string[] private gateways;

    // What resolveCallback needs to carry on after a batch gateway answered.
    struct Pending {
        bytes name;
        bytes4 selector; // the record's function, for UnsupportedResolverProfile
        address resolver;
        bool extended;
        bytes4 callback;
        bytes extraData;
        string[] gateways;
    }

    constructor(IRegistry registry_, string[] memory gateways_) {
        registry = registry_;
        for (uint256 i = 0; i < gateways_.length; i++) {
            gateways.push(gateways_[i]);
        }
    }

    function supportsInterface(bytes4 id) external pure returns (bool) {
        return id == ERC165;
    }

    // batchGateways are the gateways resolve() sends offchain lookups to.
    function batchGateways() external view returns (string[] memory) {
        return gateways;
    }

    function resolve(bytes calldata name, bytes calldata data) external view returns (bytes memory, address) {
        return _resolve(name, data, gateways);
    }

    function resolveWithGateways(bytes calldata name, bytes calldata data, string[] calldata gateways_)
        external
        view
        returns (bytes memory, address)
    {
        return _resolve(name, data, gateways_);
    }

    // findResolver returns the resolver ENSIP-10 finds for name, the
    // namehash of name, and the offset in name of the suffix whose registry
    // entry holds the resolver (0: the name's own).
    function findResolver(bytes calldata name) external view returns (address resolver, bytes32 node, uint256 offset) {
        return _find(name, 0);
    }

    function _find(bytes calldata name, uint256 offset) internal view returns (address resolver, bytes32 node, uint256 at) {
        if (offset >= name.length) revert DNSDecodingFailed(name);
        uint256 len = uint8(name[offset]);
        if (len == 0) {
            if (offset + 1 != name.length) revert DNSDecodingFailed(name);
            return (registry.resolver(bytes32(0)), bytes32(0), offset);
        }
        uint256 next = offset + 1 + len;
        if (next >= name.length) revert DNSDecodingFailed(name);
        (address parentResolver, bytes32 parent, uint256 parentAt) = _find(name, next);
        node = keccak256(abi.encodePacked(parent, keccak256(name[offset + 1:next])));
        resolver = registry.resolver(node);
        if (resolver != address(0)) return (resolver, node, offset);
        return (parentResolver, node, parentAt);
    }

    function _resolve(bytes calldata name, bytes calldata data, string[] memory gateways_)
        internal
        view
        returns (bytes memory, address)
    {
        (address resolver,, uint256 offset) = _find(name, 0);
        if (resolver == address(0)) revert ResolverNotFound(name);
        if (resolver.code.length == 0) revert ResolverNotContract(name, resolver);
        bool extended = _supportsExtended(resolver);
        if (offset != 0 && !extended) revert ResolverNotFound(name);
        bytes memory call = extended ? abi.encodeCall(IExtendedResolver.resolve, (name, data)) : data;
        (bool ok, bytes memory ret) = resolver.staticcall(call);
        Pending memory p;
        p.name = name;
        p.selector = bytes4(data);
        p.resolver = resolver;
        p.extended = extended;
        p.gateways = gateways_;
        return _finish(p, ok, ret);
    }

    function _supportsExtended(address resolver) internal view returns (bool) {
        (bool ok, bytes memory ret) = resolver.staticcall{gas: 30000}(abi.encodeWithSelector(ERC165, EXTENDED_RESOLVER));
        return ok && ret.length >= 32 && uint256(bytes32(ret)) == 1;
    }

    // _finish returns a resolver's answer, or turns its OffchainLookup into
    // one to the batch gateways, or reverts with its error.
    function _finish(Pending memory p, bool ok, bytes memory ret) internal view returns (bytes memory, address) {
        if (ok) {
            if (p.extended) {
                return (abi.decode(ret, (bytes)), p.resolver);
            }
            if (ret.length == 0) revert UnsupportedResolverProfile(p.selector);
            return (ret, p.resolver);
        }
        if (ret.length >= 4 && bytes4(ret) == OffchainLookup.selector) {
            (address sender, string[] memory urls, bytes memory callData, bytes4 callback, bytes memory extraData) =
                abi.decode(_tail(ret, 4), (address, string[], bytes, bytes4, bytes));
            if (sender != p.resolver) revert ResolverError(ret);
            IBatchGateway.Request[] memory requests = new IBatchGateway.Request[](1);
            requests[0] = IBatchGateway.Request(sender, urls, callData);
            p.callback = callback;
            p.extraData = extraData;
            revert OffchainLookup(
                address(this),
                p.gateways,
                abi.encodeCall(IBatchGateway.query, (requests)),
                this.resolveCallback.selector,
                abi.encode(p)
            );
        }
        revert ResolverError(ret);
    }

    function resolveCallback(bytes calldata response, bytes calldata extraData)
        external
        view
        returns (bytes memory, address)
    {
        Pending memory p = abi.decode(extraData, (Pending));
        (bool[] memory failures, bytes[] memory responses) = abi.decode(response, (bool[], bytes[]));
        if (failures.length != 1 || responses.length != 1) revert InvalidBatchGatewayResponse();
        if (failures[0]) {
            bytes memory e = responses[0];
            if (e.length >= 4 && bytes4(e) == HttpError.selector) {
                assembly {
                    revert(add(e, 32), mload(e))
                }
            }
            revert ResolverError(e);
        }
        (bool ok, bytes memory ret) = p.resolver.staticcall(abi.encodeWithSelector(p.callback, responses[0], p.extraData));
        return _finish(p, ok, ret);
    }

    function _tail(bytes memory b, uint256 from) private pure returns (bytes memory out) {
        out = new bytes(b.length - from);
        for (uint256 i = 0; i < out.length; i++) {
            out[i] = b[from + i];
        }
    }
}
