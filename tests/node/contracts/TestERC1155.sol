// SPDX-License-Identifier: MIT
pragma solidity ^0.8.20;

import {ERC1155} from "@openzeppelin/contracts/token/ERC1155/ERC1155.sol";
import {Ownable} from "@openzeppelin/contracts/access/Ownable.sol";

/// An ERC-1155 for the join-rule tests: its owner mints, burns and moves anyone's balance.
contract TestERC1155 is ERC1155, Ownable {
    constructor() ERC1155("") Ownable(msg.sender) {}

    function mint(address to, uint256 id, uint256 value) external onlyOwner {
        _mint(to, id, value, "");
    }

    function burn(address from, uint256 id, uint256 value) external onlyOwner {
        _burn(from, id, value);
    }

    function move(address from, address to, uint256 id, uint256 value) external onlyOwner {
        _safeTransferFrom(from, to, id, value, "");
    }
}
