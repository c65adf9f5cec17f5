// SPDX-License-Identifier: MIT
// A hostile extended resolver for the CCIP-read tests: every answer of its
// gateway starts another OffchainLookup until `rounds` lookups were made,
// then the last answer is the text record. Its lookups name `sender`, which
// is itself unless another address is given (a sender mismatch).
pragma solidity 0.8.28;

error OffchainLookup(address sender, string[] urls, bytes callData, bytes4 callbackFunction, bytes extraData);

contract LoopResolver {
    address public immutable sender;
    uint256 public immutable rounds;
    string[] private urls;

    constructor(address sender_, string[] memory urls_, uint256 rounds_) {
        sender = sender_ == address(0) ? address(this) : sender_;
        rounds = rounds_;
        for (uint256 i = 0; i < urls_.length; i++) {
            urls.push(urls_[i]);
        }
    }

    function supportsInterface(bytes4 id) external pure returns (bool) {
        return id == 0x01ffc9a7 || id == 0x9061b923;
    }

    function resolve(bytes calldata, bytes calldata data) external view returns (bytes memory) {
        revert OffchainLookup(sender, urls, data, this.next.selector, abi.encode(uint256(1)));
    }

    function next(bytes calldata response, bytes calldata extraData) external view returns (bytes memory) {
        uint256 n = abi.decode(extraData, (uint256));
        if (n < rounds) {
            revert OffchainLookup(sender, urls, response, this.next.selector, abi.encode(n + 1));
        }
        return abi.encode(string(response));
    }
}
