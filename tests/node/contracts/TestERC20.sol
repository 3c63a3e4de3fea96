// SPDX-License-Identifier: MIT
pragma solidity ^0.8.20;

import {ERC20} from "@openzeppelin/contracts/token/ERC20/ERC20.sol";
import {Ownable} from "@openzeppelin/contracts/access/Ownable.sol";

/// An ERC-20 for the join-rule tests: its owner mints, burns and moves anyone's balance, so the
/// tests need no holder's key.
contract TestERC20 is ERC20, Ownable {
    constructor() ERC20("Join Test Token", "JTT") Ownable(msg.sender) {}

    function mint(address to, uint256 value) external onlyOwner {
        _mint(to, value);
    }

    function burn(address from, uint256 value) external onlyOwner {
        _burn(from, value);
    }

    function move(address from, address to, uint256 value) external onlyOwner {
        _transfer(from, to, value);
    }
}
