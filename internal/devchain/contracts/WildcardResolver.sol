// SPDX-License-Identifier: MIT
// An on-chain extended resolver (ENSIP-10) for tests and the devnet: set on
// a parent name, it answers text() for any name under it, registered or not,
// through resolve(bytes,bytes). Records are kept by node and set by the
// deployer.
pragma solidity 0.8.28;

contract WildcardResolver {
    error UnsupportedResolverProfile(bytes4 selector);

    address public immutable owner;
    mapping(bytes32 => mapping(string => string)) private texts;

    constructor() {
        owner = msg.sender;
    }

    function setText(bytes32 node, string calldata key, string calldata value) external {
        require(msg.sender == owner, "WildcardResolver: not the owner");
        texts[node][key] = value;
    }

    function text(bytes32 node, string memory key) public view returns (string memory) {
        return texts[node][key];
    }

    function resolve(bytes calldata, bytes calldata data) external view returns (bytes memory) {
        if (data.length < 4 || bytes4(data) != this.text.selector) revert UnsupportedResolverProfile(bytes4(data));
        (bytes32 node, string memory key) = abi.decode(data[4:], (bytes32, string));
        return abi.encode(text(node, key));
    }

    function supportsInterface(bytes4 id) external pure returns (bool) {
        return id == 0x01ffc9a7 || id == 0x9061b923 || id == 0x59d1d43c;
    }
}
