// SPDX-License-Identifier: MIT
pragma solidity ^0.8.20;

import {ERC721} from "@openzeppelin/contracts/token/ERC721/ERC721.sol";
import {Ownable} from "@openzeppelin/contracts/access/Ownable.sol";

/// An ERC-721 for the join-rule tests: its owner mints, burns and moves any token.
contract TestERC721 is ERC721, Ownable {
    constructor() ERC721("Join Test NFT", "JTN") Ownable(msg.sender) {}

    function mint(address to, uint256 tokenId) external onlyOwner {
        _mint(to, tokenId);
    }

    function burn(uint256 tokenId) external onlyOwner {
        _burn(tokenId);
    }

    function move(address from, address to, uint256 tokenId) external onlyOwner {
        _transfer(from, to, tokenId);
    }
}
