// SPDX-License-Identifier: MIT
pragma solidity ^0.8.20;

/// The batch reader of the join-rule tests: the interface entityd calls on Multicall3
/// (aggregate3, getEthBalance, getBlockNumber), written for these tests. Every call of a batch
/// runs in the same eth_call, so at the same block.
contract JoinMulticall {
    struct Call3 {
        address target;
        bool allowFailure;
        bytes callData;
    }

    struct Result {
        bool success;
        bytes returnData;
    }

    function aggregate3(Call3[] calldata calls) external payable returns (Result[] memory results) {
        results = new Result[](calls.length);
        for (uint256 i = 0; i < calls.length; i++) {
            (bool ok, bytes memory ret) = calls[i].target.call(calls[i].callData);
            require(ok || calls[i].allowFailure, "JoinMulticall: a call failed");
            results[i] = Result(ok, ret);
        }
    }

    function getEthBalance(address who) external view returns (uint256) {
        return who.balance;
    }

    function getBlockNumber() external view returns (uint256) {
        return block.number;
    }
}
