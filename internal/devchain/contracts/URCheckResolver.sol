// SPDX-License-Identifier: MIT
// Tells whether a client resolved through the Universal Resolver, like the
// "universal-resolver" case of ENS's resolution-tests: to the Universal
// Resolver it is an extended resolver whose resolve() answers
// "✅️ Universal Resolver" for the key "description"; to anyone else it is a
// plain resolver whose text() answers "❌️ Universal Resolver".
pragma solidity 0.8.28;

contract URCheckResolver {
    error UnsupportedResolverProfile(bytes4 selector);

    address public immutable universalResolver;

    constructor(address universalResolver_) {
        universalResolver = universalResolver_;
    }

    function supportsInterface(bytes4 id) external view returns (bool) {
        if (id == 0x01ffc9a7) return true;
        return msg.sender == universalResolver ? id == 0x9061b923 : id == 0x59d1d43c;
    }

    function text(bytes32, string calldata key) external pure returns (string memory) {
        return _text(key, false);
    }

    function resolve(bytes calldata, bytes calldata data) external pure returns (bytes memory) {
        if (data.length < 4 || bytes4(data) != this.text.selector) revert UnsupportedResolverProfile(bytes4(data));
        (, string memory key) = abi.decode(data[4:], (bytes32, string));
        return abi.encode(_text(key, true));
    }

    function _text(string memory key, bool viaUR) private pure returns (string memory) {
        if (keccak256(bytes(key)) != keccak256("description")) return "";
        return viaUR ? unicode"✅️ Universal Resolver" : unicode"❌️ Universal Resolver";
    }
}
